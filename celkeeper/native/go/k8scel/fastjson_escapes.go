package k8scel

import (
	"unicode/utf8"
)

// escapedSpan reads a string holding escapes, from its opening quote at d.pos, as encoding/json's
// unquote decodes it (sigs.k8s.io/json's is the same code): \" \\ \/ \b \f \n \r \t, and \uXXXX
// outside the surrogate range. Anything else (a surrogate, `\'` or another escape the JSON scanner
// refuses, a control character, invalid UTF-8) is errFallback, as plain strings are. Objects as the
// API server lists them escape quotes in their managedFields' keys (`k:{\"name\":\"app\"}`): without
// this, every such object went through Kubernetes' (reflective) decoder. The bytes returned are
// the decoded string's own (not the input's).
func (d *jsonDecoder) escapedSpan() ([]byte, error) {
	start := d.pos + 1
	out := make([]byte, 0, 64)
	ascii := true
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(out) {
				return nil, errFallback
			}
			d.pos = i + 1
			return out, nil
		case c < 0x20:
			return nil, errFallback
		case c != '\\':
			if c >= utf8.RuneSelf {
				ascii = false
			}
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(d.data) {
			return nil, errFallback
		}
		switch e := d.data[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(d.data[i+2:])
			if !ok || (r >= 0xd800 && r < 0xe000) { // surrogates (pairs or not): Kubernetes' decoder
				return nil, errFallback
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default:
			return nil, errFallback
		}
		i += 2
	}
	return nil, errFallback
}

// hex4 reads the four hexadecimal digits of a \u escape.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
