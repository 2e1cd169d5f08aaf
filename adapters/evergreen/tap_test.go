package evergreen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader hands out src a random chunk at a time, as a connection
// delivers what has arrived, and counts its reads.
type chunkReader struct {
	r          *rand.Rand
	src        []byte
	given      int
	reads, max int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.given == len(c.src) {
		return 0, io.EOF
	}
	n := min(len(c.src)-c.given, 1+c.r.IntN(c.max), len(p))
	copy(p, c.src[c.given:c.given+n])
	c.given += n
	c.reads++
	return n, nil
}

// whole says an envelope is whole exactly when all its bytes have been
// read from the connection, and receiving a whole one (as connect-go
// does: the 5-byte prefix, then the length it gives) reads nothing more;
// for envelopes of every size up to beyond the buffer, and any chunking.
func TestTappedBodyWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	wholes := 0
	for trial := range 400 {
		var src []byte
		var ends []int
		for range 1 + r.IntN(30) {
			size := r.IntN(200)
			if r.IntN(10) == 0 {
				size = tapBufferBytes - 100 + r.IntN(200) // about the buffer's size
			}
			src = append(src, byte(r.IntN(3)))
			src = binary.BigEndian.AppendUint32(src, uint32(size))
			for range size {
				src = append(src, byte(r.Uint32()))
			}
			ends = append(ends, len(src))
		}
		conn := &chunkReader{r: r, src: src, max: 1 + r.IntN(3*tapBufferBytes)}
		b := &tappedBody{Reader: bufio.NewReaderSize(conn, tapBufferBytes), Closer: io.NopCloser(nil)}
		off := 0
		for i, end := range ends {
			whole := b.whole()
			if want := conn.given >= end; whole != want {
				t.Fatalf("trial %d envelope %d (bytes %d-%d, %d read): whole %v, want %v", trial, i, off, end, conn.given, whole, want)
			}
			reads := conn.reads
			var prefix [5]byte
			if _, err := io.ReadFull(b, prefix[:]); err != nil {
				t.Fatal(err)
			}
			var data bytes.Buffer
			if _, err := io.CopyN(&data, b, int64(binary.BigEndian.Uint32(prefix[1:]))); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data.Bytes(), src[off+5:end]) {
				t.Fatalf("trial %d envelope %d: data differs", trial, i)
			}
			if whole {
				wholes++
				if conn.reads != reads {
					t.Fatalf("trial %d envelope %d: whole, but receiving it read the connection %d times", trial, i, conn.reads-reads)
				}
			}
			off = end
		}
		if b.whole() {
			t.Fatalf("trial %d: whole at the end of the stream", trial)
		}
	}
	if wholes < 1000 {
		t.Fatalf("only %d envelopes were whole before receiving: the test does not exercise whole", wholes)
	}
}
