package api

// Internals the external tests (package api_test) check against.
var (
	MaxBatchInfoLogs = maxBatchInfoLogs
	RequestField     = requestField
)
