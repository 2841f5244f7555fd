"""The search: generators propose, the evaluator judges, the supervisor keeps the best."""
