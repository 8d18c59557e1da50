"""Data preparation: Hugging Face datasets or local files into verl's RL parquet format."""
