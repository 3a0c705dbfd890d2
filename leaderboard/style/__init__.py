"""Style control: the style features of answers and the style-controlled board beside the default."""
