package runner

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// pattern matches hierarchical case names
// (bridge/frontend:triton/backend:evergreen/unicode-split): "*" matches
// within one segment, "**" across segments, "?" one character; a pattern
// also matches every name below it (bridge/frontend:triton matches all of
// that frontend's cases).
type pattern struct {
	src string
	re  *regexp.Regexp
}

func compilePattern(p string) (pattern, error) {
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*' && i+1 < len(p) && p[i+1] == '*':
			sb.WriteString(".*")
			i++
		case c == '*':
			sb.WriteString("[^/]*")
		case c == '?':
			sb.WriteString("[^/]")
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString("(/.*)?$")
	re, err := regexp.Compile(sb.String())
	if err != nil {
		return pattern{}, fmt.Errorf("pattern %q: %v", p, err)
	}
	return pattern{src: p, re: re}, nil
}

func (p pattern) match(name string) bool { return p.re.MatchString(name) }

type patterns []pattern

func compilePatterns(ps []string) (patterns, error) {
	var out patterns
	for _, p := range ps {
		for _, part := range strings.Split(p, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			cp, err := compilePattern(part)
			if err != nil {
				return nil, err
			}
			out = append(out, cp)
		}
	}
	return out, nil
}

func (ps patterns) any(name string) bool {
	for _, p := range ps {
		if p.match(name) {
			return true
		}
	}
	return false
}

// ReadPatterns reads a known-failing file: one pattern per line; blank
// lines and lines starting with # are ignored.
func ReadPatterns(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
