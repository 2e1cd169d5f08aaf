package runner

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// maxViewBuffer bounds the bytes a wireView holds for a frame not yet
// complete; past it the rest is shown raw.
const maxViewBuffer = 1 << 20

// wireView renders one direction of a relayed connection for --trace:
// HTTP as text, and after a WebSocket upgrade each frame decoded (unmasked)
// with its opcode, so Glide's masked client frames read as JSON.
type wireView struct {
	ws  bool
	buf []byte
}

var wsOpcodes = map[byte]string{0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}

// render returns what b shows.
func (v *wireView) render(b []byte) string {
	if !v.ws {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		lower := bytes.ToLower(b)
		upgrading := end >= 0 && (bytes.Contains(lower, []byte("upgrade: websocket")) || bytes.Contains(b, []byte(" 101 ")))
		if !upgrading {
			return printable(b)
		}
		v.ws = true
		head := printable(b[:end+4])
		if rest := b[end+4:]; len(rest) > 0 {
			return head + "\n" + v.frames(rest)
		}
		return head
	}
	return v.frames(b)
}

// frames decodes the complete frames buffered so far.
func (v *wireView) frames(b []byte) string {
	v.buf = append(v.buf, b...)
	var out []string
	for {
		f, n, ok := wsFrame(v.buf)
		if !ok {
			break
		}
		out = append(out, f)
		v.buf = v.buf[n:]
	}
	if len(v.buf) > maxViewBuffer {
		out = append(out, printable(v.buf))
		v.buf = nil
	}
	if len(out) == 0 {
		return fmt.Sprintf("(%d bytes of a WebSocket frame)", len(b))
	}
	return strings.Join(out, "\n")
}

// wsFrame decodes one frame from the front of b.
func wsFrame(b []byte) (string, int, bool) {
	if len(b) < 2 {
		return "", 0, false
	}
	fin, op := b[0]&0x80 != 0, b[0]&0x0f
	masked := b[1]&0x80 != 0
	n := uint64(b[1] & 0x7f)
	i := 2
	switch n {
	case 126:
		if len(b) < 4 {
			return "", 0, false
		}
		n, i = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return "", 0, false
		}
		n, i = binary.BigEndian.Uint64(b[2:]), 10
	}
	var key []byte
	if masked {
		if len(b) < i+4 {
			return "", 0, false
		}
		key, i = b[i:i+4], i+4
	}
	if n > maxViewBuffer || uint64(len(b)-i) < n {
		return "", 0, false
	}
	payload := append([]byte(nil), b[i:i+int(n)]...)
	for j := range payload {
		if key != nil {
			payload[j] ^= key[j%4]
		}
	}
	name := wsOpcodes[op]
	if name == "" {
		name = fmt.Sprintf("opcode %d", op)
	}
	if !fin {
		name += " (more follows)"
	}
	if masked {
		name += ", masked"
	}
	return fmt.Sprintf("[ws %s] %s", name, printable(payload)), i + int(n), true
}
