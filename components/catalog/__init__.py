"""Hardware, model and image facts as data (no Pulumi). See ``tpu`` for the TPU table and ``images``
for the container images pinned by tag and digest."""
