"""Facts about AWS that the program and the tools read: regions, zones, GPU instances, prices (each with
its source and date), principals and IAM policy documents. Plain data and pure functions."""
