package anthropic

// Update reports the -update flag to the external tests.
func Update() bool { return *update }
