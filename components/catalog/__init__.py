"""Hardware and model facts as data (no Pulumi). See ``tpu`` for the TPU table."""
