"""PyTorch profiler (Kineto) traces: a streaming reader, the key_averages tables, ranks and steps."""
