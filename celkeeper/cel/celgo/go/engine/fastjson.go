package engine

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// decodeObject decodes a JSON object into unstructured data exactly as Kubernetes' decoder does
// (k8s.io/apimachinery/pkg/util/json.Unmarshal into a map: sigs.k8s.io/json with PreserveInts -
// a number without '.' that parses as an int64 is an int64, every other number a float64; a key
// given twice keeps its last value), only faster: it reads the bytes once, without reflection.
// Anything it does not handle plainly (escapes or invalid UTF-8 in strings, numbers out of range,
// invalid JSON, nesting deeper than encoding/json's limit) is errFallback: the caller then uses
// Kubernetes' decoder, which gives the result or the error Kubernetes gives. fastjson_test.go
// compares both on generated and hand-written documents.
func decodeObject(data []byte) (map[string]any, error) {
	d := jsonDecoder{data: data}
	d.space()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, errFallback
	}
	v, err := d.object(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, errFallback
	}
	return v, nil
}

var errFallback = errors.New("not decoded by the fast path")

// maxDepth is encoding/json's maxNestingDepth.
const maxDepth = 10000

type jsonDecoder struct {
	data []byte
	pos  int
}

func (d *jsonDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (any, error) {
	d.space()
	if d.pos >= len(d.data) {
		return nil, errFallback
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == 't':
		return d.literal("true", true)
	case c == 'f':
		return d.literal("false", false)
	case c == 'n':
		return d.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, errFallback
}

func (d *jsonDecoder) literal(word string, v any) (any, error) {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return nil, errFallback
	}
	d.pos += len(word)
	return v, nil
}

func (d *jsonDecoder) object(depth int) (map[string]any, error) {
	if depth+1 > maxDepth {
		return nil, errFallback
	}
	d.pos++ // {
	m := map[string]any{}
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, errFallback
		}
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, errFallback
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[key] = v
		d.space()
		if d.pos >= len(d.data) {
			return nil, errFallback
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, nil
		default:
			return nil, errFallback
		}
	}
}

func (d *jsonDecoder) array(depth int) ([]any, error) {
	if depth+1 > maxDepth {
		return nil, errFallback
	}
	d.pos++ // [
	out := []any{}
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return out, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, errFallback
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return out, nil
		default:
			return nil, errFallback
		}
	}
}

// str reads a string without escapes whose bytes are valid UTF-8 and hold no control characters;
// any other string is errFallback.
func (d *jsonDecoder) str() (string, error) {
	start := d.pos + 1
	ascii := true
	for i := start; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			s := d.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return "", errFallback
			}
			d.pos = i + 1
			return string(s), nil
		case c == '\\' || c < 0x20:
			return "", errFallback
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", errFallback
}

// number reads a JSON number (RFC 8259 grammar) and converts it as sigs.k8s.io/json's
// convertNumber does with PreserveInts.
func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	i := d.pos
	n := len(d.data)
	if i < n && d.data[i] == '-' {
		i++
	}
	switch {
	case i < n && d.data[i] == '0':
		i++
	case i < n && d.data[i] >= '1' && d.data[i] <= '9':
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	default:
		return nil, errFallback
	}
	dot := false
	if i < n && d.data[i] == '.' {
		dot = true
		i++
		if i >= n || d.data[i] < '0' || d.data[i] > '9' {
			return nil, errFallback
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	if i < n && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		if i < n && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if i >= n || d.data[i] < '0' || d.data[i] > '9' {
			return nil, errFallback
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	s := string(d.data[start:i])
	if !dot { // convertNumber: no '.' -> an int64 when it parses as one
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, errFallback
	}
	return f, nil
}
