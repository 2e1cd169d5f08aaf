package canonical

// SetKind sets e's kind from one of the Kind* wrappers (the generated oneof
// interface is unexported, so code holding a kind as a value of type any
// sets it here). It reports false, leaving e unchanged, for anything else.
func SetKind(e *Event, kind any) bool {
	switch k := kind.(type) {
	case *KindLifecycle:
		e.Kind = k
	case *KindMessageStart:
		e.Kind = k
	case *KindMessageFinish:
		e.Kind = k
	case *KindBlockStart:
		e.Kind = k
	case *KindBlockDelta:
		e.Kind = k
	case *KindBlockFinish:
		e.Kind = k
	case *KindToolStarted:
		e.Kind = k
	case *KindToolOutput:
		e.Kind = k
	case *KindToolFinished:
		e.Kind = k
	case *KindToolFailed:
		e.Kind = k
	case *KindInputRequested:
		e.Kind = k
	case *KindInputAnswered:
		e.Kind = k
	case *KindStateSnapshot:
		e.Kind = k
	case *KindStateUpdate:
		e.Kind = k
	case *KindCheckpoint:
		e.Kind = k
	case *KindTask:
		e.Kind = k
	case *KindCustom:
		e.Kind = k
	case *KindError:
		e.Kind = k
	default:
		return false
	}
	return true
}
