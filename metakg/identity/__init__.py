"""Who is who: string similarity of names (typo-tolerant search). Used by the stores and the feature
packages; uses only the schemas."""
