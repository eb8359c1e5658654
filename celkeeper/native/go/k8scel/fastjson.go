package k8scel

import (
	"errors"
	"strconv"
	"sync"
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
//
// What it allocates is what it returns: the maps (made at their size), the lists (made at their
// length: items and members are gathered on scratch stacks that decoders reuse), the strings and the
// numbers; a key the decoder has seen before is not copied again (jsonDecoder.keys).
func decodeObject(data []byte) (map[string]any, error) {
	return decodeObjectInto(data, nil)
}

// decodeObjectInto is decodeObject whose maps of at most smallMap members are recycled ones, each
// recorded in maps (nil: new maps, recorded nowhere).
func decodeObjectInto(data []byte, maps *Maps) (map[string]any, error) {
	d := decoders.Get().(*jsonDecoder)
	defer d.release()
	d.data, d.pos, d.maps = data, 0, maps
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
	data    []byte
	pos     int
	items   []any    // the items of the arrays being read (each array's are copied out at its end)
	members []member // the members of the objects being read (likewise)
	// the keys this decoder has read (kept across documents, up to maxKeys): the objects of a
	// webhook's requests have the same few hundred field names, each then made once
	keys map[string]string
	// likewise the short string values (names, images, labels, enumerations: mostly the same from
	// one object to the next)
	values map[string]any
	maps   *Maps // where the maps taken from smallMaps are recorded (nil: every map made new)
}

// Maps are the maps of a decoded object taken from the recycled ones (decodeObjectInto), to be given
// back once nothing refers to the object or to anything in it (Recycle): a request decoded without
// allocating its maps again. The maps of at most smallMap members are most of what decoding a
// Kubernetes object allocates (labels, resources, securityContext, each container's fields...).
type Maps struct {
	made []map[string]any
}

// smallMap is how many members a map holds in Go's smallest map table (one group of slots): every map
// made for that many or fewer takes the same memory, and an emptied one takes that many again without
// growing.
const smallMap = 8

// smallMaps holds emptied maps of at most smallMap members (Maps.Recycle).
var smallMaps sync.Pool

// maxRecorded bounds the maps a Maps keeps for recycling (a huge object's others are left to the
// collector).
const maxRecorded = 4096

// recorders holds emptied Maps (Recycle), their record's room kept.
var recorders = sync.Pool{New: func() any { return new(Maps) }}

// NewMaps is an empty Maps, one given back earlier where there is one.
func NewMaps() *Maps {
	return recorders.Get().(*Maps)
}

// Recycle empties the maps and gives them back for later decodings, and the Maps itself: nothing may
// refer to the decoded object, or to anything in it, after (a map grown past smallMap members by
// whoever changed the object is left to the collector), nor use m. Call it once.
func (m *Maps) Recycle() {
	if m == nil {
		return
	}
	for i, made := range m.made {
		if len(made) <= smallMap {
			clear(made)
			smallMaps.Put(made)
		}
		m.made[i] = nil
	}
	m.made = m.made[:0]
	recorders.Put(m)
}

func (d *jsonDecoder) newMap(n int) map[string]any {
	if d.maps == nil || n > smallMap || len(d.maps.made) >= maxRecorded {
		return make(map[string]any, n)
	}
	m, _ := smallMaps.Get().(map[string]any)
	if m == nil {
		m = make(map[string]any, smallMap)
	}
	d.maps.made = append(d.maps.made, m)
	return m
}

// Bounds of a decoder's keys (and of its string values): how many, and the longest kept.
const (
	maxKeys      = 2048
	maxKeyLength = 64
)

type member struct {
	key   string
	value any
}

var decoders = sync.Pool{New: func() any { return &jsonDecoder{} }}

// maxKeptScratch bounds the scratch a pooled decoder keeps (a huge document's is dropped).
const maxKeptScratch = 4096

// release empties the decoder (it holds nothing of what it decoded) and returns it to the pool.
func (d *jsonDecoder) release() {
	d.data, d.maps = nil, nil
	if cap(d.items) > maxKeptScratch || cap(d.members) > maxKeptScratch {
		d.items, d.members = nil, nil
	}
	clear(d.items[:cap(d.items)])
	clear(d.members[:cap(d.members)])
	d.items, d.members = d.items[:0], d.members[:0]
	decoders.Put(d)
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
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return map[string]any{}, nil
	}
	base := len(d.members)
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, errFallback
		}
		key, err := d.key()
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
		d.members = append(d.members, member{key, v})
		d.space()
		if d.pos >= len(d.data) {
			return nil, errFallback
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			m := d.newMap(len(d.members) - base)
			for _, mb := range d.members[base:] { // in order: a key given twice keeps its last value
				m[mb.key] = mb.value
			}
			clear(d.members[base:])
			d.members = d.members[:base]
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
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return []any{}, nil
	}
	base := len(d.items)
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.items = append(d.items, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, errFallback
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			out := make([]any, len(d.items)-base)
			copy(out, d.items[base:])
			clear(d.items[base:])
			d.items = d.items[:base]
			return out, nil
		default:
			return nil, errFallback
		}
	}
}

// str reads a string whose bytes are valid UTF-8 and hold no control characters (one with escapes:
// escapedSpan); any other string is errFallback. A short one read before is not made again
// (d.values: the string and the interface holding it are shared, read-only).
func (d *jsonDecoder) str() (any, error) {
	s, err := d.span()
	if err != nil {
		return nil, err
	}
	if len(s) > maxKeyLength {
		return string(s), nil
	}
	if known, ok := d.values[string(s)]; ok {
		return known, nil
	}
	str := string(s)
	v := any(str)
	if len(d.values) < maxKeys {
		if d.values == nil {
			d.values = make(map[string]any, 256)
		}
		d.values[str] = v
	}
	return v, nil
}

// key reads an object's key as str does; one read before is not copied again (d.keys).
func (d *jsonDecoder) key() (string, error) {
	s, err := d.span()
	if err != nil {
		return "", err
	}
	if known, ok := d.keys[string(s)]; ok {
		return known, nil
	}
	key := string(s)
	if len(d.keys) < maxKeys && len(key) <= maxKeyLength {
		if d.keys == nil {
			d.keys = make(map[string]string, 256)
		}
		d.keys[key] = key
	}
	return key, nil
}

// span reads a string (see str) and returns its bytes.
func (d *jsonDecoder) span() ([]byte, error) {
	start := d.pos + 1
	ascii := true
	for i := start; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			s := d.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, errFallback
			}
			d.pos = i + 1
			return s, nil
		case c == '\\':
			return d.escapedSpan()
		case c < 0x20:
			return nil, errFallback
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, errFallback
}

// maxSafeDigits: an integer of at most this many characters (a sign included) is an int64.
const maxSafeDigits = 18

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
	digits := i - start
	dot, exp := false, false
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
		exp = true
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
	if !dot && !exp && digits <= maxSafeDigits { // an int64 for sure: read without a copy
		var v int64
		neg := d.data[start] == '-'
		from := start
		if neg {
			from++
		}
		for _, c := range d.data[from:i] {
			v = v*10 + int64(c-'0')
		}
		if neg {
			v = -v
		}
		return v, nil
	}
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
