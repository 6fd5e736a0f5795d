"""What is measured on a model: discovery scores, CERS, NCS, attention mass, overlap, controls, statistics."""
