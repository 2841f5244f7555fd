"""Turn a verdict into what the next proposal is told: the evidence, short and specific."""

from __future__ import annotations

from assay.verdict import Category, Verdict


def summarize(v: Verdict, limit: int = 2500) -> str:
    lines: list[str] = [f"verdict: {'ACCEPTED' if v.accepted else 'REJECTED'}"]
    for r in v.reasons:
        lines.append(f"- {r.category.value}: {r.message}")
    corr = v.stage("correctness")
    if corr is not None:
        for f in corr.findings:
            ev = f.evidence
            if ev.get("where"):
                lines.append(f"  where: {ev['where']}; max abs error {ev.get('max_abs_err', 0):.3g}; "
                             f"case {ev.get('case')}")
    for name in ("static_scan", "integrity"):
        st = v.stage(name)
        if st is not None:
            for f in st.findings[:5]:
                if not f.rejects:
                    lines.append(f"- note ({name}): {f.message}")
    timing = v.stage("timing")
    if timing is not None and timing.evidence.get("shapes"):
        for s in timing.evidence["shapes"]:
            sp = ", ".join(f"{k} {x['estimate']:.3f}x [{x['lo']:.3f}, {x['hi']:.3f}] {x['call']}"
                           for k, x in s.get("speedup", {}).items())
            roof = s.get("roofline", {}).get("fraction")
            lines.append(f"- timing {s['dims']}: median {s['candidate']['median'] * 1e6:.1f} us; speedup {sp}; "
                         f"roofline fraction {roof if roof is None else round(roof, 3)}")
    prof = v.stage("profile")
    if prof is not None and prof.evidence.get("bottleneck"):
        e = prof.evidence
        occ = e.get("occupancy_pct")
        lines.append(f"- profile {e.get('dims')}: {e['bottleneck']}-bound (DRAM {e['dram_pct']:.0f}% of peak, "
                     f"SM {e['sm_pct']:.0f}%, occupancy {'?' if occ is None else f'{occ:.0f}%'}); "
                     f"top stalls: {', '.join(e.get('top_stalls') or []) or '-'}")
    text = "\n".join(lines)
    return text[:limit]


def error_size(v: Verdict) -> float | None:
    """The max abs error of the minimal failing case (for the debug convergence guard)."""
    corr = v.stage("correctness")
    if corr is None:
        return None
    for f in corr.findings:
        if f.rejects and f.category is Category.correctness:
            return float(f.evidence.get("max_abs_err", float("inf")))
    return None


def score(v: Verdict) -> float | None:
    """Weighted geomean speedup against eager; without an eager baseline (``--baseline compile``),
    against the strongest baseline measured (the smallest speedup); None when there is no timing."""
    t = v.stage("timing")
    g = (t.evidence.get("geomean_speedup") or {}) if t is not None else {}
    if "eager" in g:
        return float(g["eager"]) or None
    vals = [float(x) for x in g.values() if x]
    return min(vals) if vals else None


def slower_than_a_baseline(v: Verdict) -> list[str]:
    t = v.stage("timing")
    if t is None:
        return []
    out = []
    for s in t.evidence.get("shapes", []):
        for name, x in s.get("speedup", {}).items():
            if x.get("call") == "slower":
                out.append(f"{name} at {s['dims']}")
    return out
