"""The Textual playground. Consumes engine events; never imports mlx itself."""
