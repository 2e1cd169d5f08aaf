package native

// WriteErrorForTest exposes writeError to the external tests.
var WriteErrorForTest = writeError
