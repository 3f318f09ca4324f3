"""Where a model comes from: `store` (the embedded model, prepared folders, resolving what `--model` means)
and `hub` (Hub models by name: config files and safetensors headers without the weights; docs/hub.md)."""
