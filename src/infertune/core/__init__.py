"""The vocabulary and plumbing every floor shares: the configuration and the workload a user states
(`config`, `workload`), the one validation layer (`validate`), numbers for people (`human`), files
(`paths`), one-line errors (`errors`) and the output schema's version (`schema`)."""
