package canonical

import (
	"errors"
	"io"
)

// Collect reads stream to its end and closes it. It returns the events read
// and the first error other than io.EOF.
func Collect(stream Stream) ([]*Event, error) {
	defer stream.Close()
	var out []*Event
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}
