"""A small corpus for retrieval tests: distractors plus targets that only one leg can find."""

DISTRACTORS = [
    "The quarterly revenue grew by eight percent compared with last year.",
    "Our deployment pipeline runs integration tests before every release.",
    "The marketing team is planning a campaign for the spring product launch.",
    "Database backups are taken every six hours and kept for thirty days.",
    "The office parking garage closes at midnight on weekdays.",
    "Engineers should rotate their SSH keys every ninety days.",
    "The new onboarding flow reduced signup abandonment significantly.",
    "Customer support tickets are triaged within four business hours.",
    "The mobile app crashes when the user rotates the screen during upload.",
    "Kubernetes nodes are drained before kernel upgrades.",
    "The design review for the billing page is scheduled for Thursday.",
    "Legal must approve every change to the privacy policy.",
    "Latency of the search endpoint rose after the cache was disabled.",
    "The finance department closes the books on the fifth business day.",
    "We migrated the message queue from RabbitMQ to Kafka last summer.",
    "The data warehouse refreshes its materialized views every night.",
    "Travel expenses above five hundred dollars need a manager's sign-off.",
    "The security team runs a phishing simulation every quarter.",
    "A memory leak in the image resizer was fixed in version 2.3.",
    "Feature flags let us ship code dark and enable it gradually.",
    "The conference keynote will be streamed live to all employees.",
    "Load balancers terminate TLS and forward plain HTTP internally.",
    "The recruiting pipeline has twelve open backend positions.",
    "Product analytics events are sampled at ten percent on mobile.",
    "The annual performance review cycle starts in November.",
    "Our CDN caches static assets for up to one week.",
    "Slow queries are logged when they take longer than two hundred milliseconds.",
    "The warehouse robots pause charging during peak shipping hours.",
    "Interns present their summer projects at the end of August.",
    "The API gateway enforces per-tenant rate limits.",
    "Printer toner can be ordered through the facilities portal.",
    "The chaos engineering team injects network partitions on Fridays.",
    "Invoices are generated on the first day of each month.",
    "The search relevance team evaluates rankings with nDCG.",
    "Passwords must contain at least twelve characters.",
    "The machine learning platform trains models on spot instances.",
    "Sales engineers prepare custom demos for enterprise prospects.",
    "Our status page reports incidents within fifteen minutes.",
    "The legacy monolith still handles payment reconciliation.",
    "A new espresso machine was installed on the third floor.",
    "Code reviews require approval from at least one owner.",
    "The documentation site is rebuilt on every merge to main.",
    "Log retention for audit events is seven years.",
    "The gym membership subsidy covers half of the monthly fee.",
    "Container images are scanned for vulnerabilities before deploy.",
    "The board meeting moved from Tuesday to Wednesday afternoon.",
    "Our SLA promises 99.9 percent monthly availability.",
    "The data science team uses notebooks for exploratory analysis.",
    "Employees can work remotely up to three days per week.",
    "The search index is rebuilt when the embedding model changes.",
    "Holiday schedules are published in the shared calendar.",
    "The payments service retries failed webhooks with exponential backoff.",
]

# Shares no content word with PARAPHRASE_QUERY: only the dense leg can find it.
PARAPHRASE_TARGET = "The cafeteria serves vegetarian lunch options every Tuesday."
PARAPHRASE_QUERY = "Which weekday offers meat-free midday meals in the canteen?"

# A rare identifier: only the lexical leg can find it.
IDENT_TARGET = "Promotion failed with ERR_7731 because the standby timeline diverged."
IDENT_QUERY = "ERR_7731"
