// Package builtin holds the few safe tools Interlingua ships for demos and
// tests: calculator, clock and echo. They run only when a deployment's tool
// allowlist names them.
package builtin

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Func is a tool: JSON arguments in, JSON result out.
type Func func(ctx context.Context, args []byte) ([]byte, error)

// maxExpression bounds the calculator's input, so a hostile argument cannot
// drive deep recursion.
const maxExpression = 256

// Tools returns the built-in tools by name; now supplies clock's time.
func Tools(now func() time.Time) map[string]Func {
	return map[string]Func{
		"calculator": calculator,
		"clock": func(context.Context, []byte) ([]byte, error) {
			return json.Marshal(map[string]string{"now": now().UTC().Format(time.RFC3339)})
		},
		"echo": func(_ context.Context, args []byte) ([]byte, error) {
			// Any syntactically valid JSON echoes, as with encoding/json's
			// Valid: repeated member names and invalid UTF-8 included.
			if !json.Value(args).IsValid(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true)) {
				return nil, canonical.Errorf(canonical.CodeInvalidArgument, "echo: arguments are not JSON")
			}
			return args, nil
		},
	}
}

func calculator(_ context.Context, args []byte) ([]byte, error) {
	var in struct {
		Expression *string `json:"expression"`
	}
	// Arguments are read as encoding/json read them, which clients were
	// served by: names match ignoring case (but not _ or -), the last of
	// repeated names wins, invalid UTF-8 becomes U+FFFD.
	if err := json.Unmarshal(args, &in, calculatorArgs); err != nil || in.Expression == nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, `calculator: arguments must be {"expression": string}`)
	}
	if len(*in.Expression) > maxExpression {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "calculator: expression longer than %d bytes", maxExpression)
	}
	p := &parser{s: *in.Expression}
	v, err := p.expr()
	if err == nil {
		p.space()
		if p.i != len(p.s) {
			err = fmt.Errorf("unexpected %q at offset %d", p.s[p.i], p.i)
		}
	}
	if err != nil {
		return nil, canonical.Errorf(canonical.CodeInvalidArgument, "calculator: %v", err)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) { // no JSON number: encoding/json's error, in its words
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(v, 'g', -1, 64))
	}
	return json.Marshal(map[string]float64{"result": v})
}

// calculatorArgs reads the calculator's arguments by encoding/json's rules.
var calculatorArgs = json.JoinOptions(json.MatchCaseInsensitiveNames(true), json.MatchCaseSensitiveDelimiter(true),
	json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// parser evaluates + - * / and parentheses over float64.
type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			break
		}
		op := p.s[p.i]
		p.i++
		var r float64
		if r, err = p.term(); op == '+' {
			v += r
		} else {
			v -= r
		}
	}
	return v, err
}

func (p *parser) term() (float64, error) {
	v, err := p.factor()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/') {
			break
		}
		op := p.s[p.i]
		p.i++
		var r float64
		if r, err = p.factor(); err != nil {
			break
		}
		if op == '*' {
			v *= r
		} else if r == 0 {
			return 0, fmt.Errorf("division by zero")
		} else {
			v /= r
		}
	}
	return v, err
}

func (p *parser) factor() (float64, error) {
	p.space()
	if p.i >= len(p.s) {
		return 0, fmt.Errorf("expression ends early")
	}
	switch c := p.s[p.i]; {
	case c == '(':
		p.i++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return 0, fmt.Errorf("missing ')'")
		}
		p.i++
		return v, nil
	case c == '-':
		p.i++
		v, err := p.factor()
		return -v, err
	case c >= '0' && c <= '9' || c == '.':
		j := p.i
		for j < len(p.s) && (p.s[j] >= '0' && p.s[j] <= '9' || p.s[j] == '.') {
			j++
		}
		v, err := strconv.ParseFloat(p.s[p.i:j], 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", p.s[p.i:j])
		}
		p.i = j
		return v, nil
	default:
		return 0, fmt.Errorf("unexpected %q at offset %d", c, p.i)
	}
}
