"""Reading data: Hugging Face configs, built-in catalogs and project files into validated models."""
