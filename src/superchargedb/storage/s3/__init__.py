"""Objects in any S3-compatible store (boto3; SeaweedFS in the tests), with the embedded
store's semantics: content-addressed by the project's sha256, keys derived from it alone."""
