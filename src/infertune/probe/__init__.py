"""What is there: hardware, library versions, and a model's shape read from its config alone."""
