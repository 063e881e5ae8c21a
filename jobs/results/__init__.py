"""What a run leaves: the test Job's accuracy gate (evaluate) and the export Job (export)."""
