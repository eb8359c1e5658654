package k8scel

import (
	"encoding/json"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// readHeader is json.Unmarshal of an AdmissionRequest's JSON (NewRequest's header) into a new
// AdmissionRequest - the same result or the same error - without encoding/json's reflection, which
// cost a third of a request's conversion (an audited object's request is mostly its header). The
// fast path (fastHeader) reads the document the way encoding/json would fill the struct when it is
// plain: every key spelled as its json tag (encoding/json also accepts other cases), none given twice
// (encoding/json merges a repeated struct field and ignores a null one), every field of its type,
// null only where it leaves the field unset (requestKind, requestResource, dryRun, object,
// oldObject, options); anything else is read by encoding/json itself. header_test.go compares both.
func readHeader(data []byte) (*admissionv1.AdmissionRequest, error) {
	if req, ok := fastHeader(data); ok {
		return req, nil
	}
	req := &admissionv1.AdmissionRequest{}
	if err := json.Unmarshal(data, req); err != nil {
		return nil, err
	}
	return req, nil
}

// headerFields: an AdmissionRequest's json tags, each with its bit in fastHeader's set of keys read.
var headerFields = map[string]uint32{
	"uid": 1 << 0, "kind": 1 << 1, "resource": 1 << 2, "subResource": 1 << 3, "requestKind": 1 << 4,
	"requestResource": 1 << 5, "requestSubResource": 1 << 6, "name": 1 << 7, "namespace": 1 << 8,
	"operation": 1 << 9, "userInfo": 1 << 10, "object": 1 << 11, "oldObject": 1 << 12, "dryRun": 1 << 13,
	"options": 1 << 14,
}

func fastHeader(data []byte) (*admissionv1.AdmissionRequest, bool) {
	d := decoders.Get().(*jsonDecoder)
	defer d.release()
	d.data, d.pos = data, 0
	req := &admissionv1.AdmissionRequest{}
	var seen uint32
	ok := d.eachMember(func(key []byte) bool {
		// encoding/json matches keys without regard to case and ignores unknown ones; it merges a
		// repeated struct field and ignores a null one: none of that here
		bit, known := headerFields[string(key)]
		if !known || seen&bit != 0 {
			return false
		}
		seen |= bit
		var s string
		ok := false
		switch string(key) {
		case "uid":
			s, ok = d.plainString()
			req.UID = types.UID(s)
		case "kind":
			req.Kind, ok = d.gvk()
		case "resource":
			req.Resource, ok = d.gvr()
		case "subResource":
			req.SubResource, ok = d.plainString()
		case "requestKind":
			if ok = d.null(); !ok && d.at('{') {
				var gvk metav1.GroupVersionKind
				gvk, ok = d.gvk()
				req.RequestKind = &gvk
			}
		case "requestResource":
			if ok = d.null(); !ok && d.at('{') {
				var gvr metav1.GroupVersionResource
				gvr, ok = d.gvr()
				req.RequestResource = &gvr
			}
		case "requestSubResource":
			req.RequestSubResource, ok = d.plainString()
		case "name":
			req.Name, ok = d.plainString()
		case "namespace":
			req.Namespace, ok = d.plainString()
		case "operation":
			s, ok = d.plainString()
			req.Operation = admissionv1.Operation(s)
		case "userInfo":
			req.UserInfo, ok = d.userInfo()
		case "object":
			req.Object.Raw, ok = d.raw()
		case "oldObject":
			req.OldObject.Raw, ok = d.raw()
		case "dryRun":
			if ok = d.null(); !ok {
				var b bool
				b, ok = d.boolean()
				req.DryRun = &b
			}
		case "options":
			req.Options.Raw, ok = d.raw()
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	d.space()
	return req, d.pos == len(d.data)
}

// members_ reads an object, calling member with each key, the decoder at its value (which member
// reads); false when the document is not an object or member returns false.
func (d *jsonDecoder) eachMember(member func(key []byte) bool) bool {
	d.space()
	if !d.at('{') {
		return false
	}
	d.pos++
	d.space()
	if d.at('}') {
		d.pos++
		return true
	}
	for {
		d.space()
		if !d.at('"') {
			return false
		}
		key, err := d.span()
		if err != nil {
			return false
		}
		d.space()
		if !d.at(':') {
			return false
		}
		d.pos++
		d.space()
		if !member(key) {
			return false
		}
		d.space()
		switch {
		case d.at(','):
			d.pos++
		case d.at('}'):
			d.pos++
			return true
		default:
			return false
		}
	}
}

func (d *jsonDecoder) at(c byte) bool { return d.pos < len(d.data) && d.data[d.pos] == c }

// null reads a null (true), or reads nothing (false).
func (d *jsonDecoder) null() bool {
	if d.at('n') {
		_, err := d.literal("null", nil)
		return err == nil
	}
	return false
}

// plainString reads a string (not null: encoding/json leaves a string field as it was on null).
func (d *jsonDecoder) plainString() (string, bool) {
	if !d.at('"') {
		return "", false
	}
	s, err := d.span()
	return string(s), err == nil
}

func (d *jsonDecoder) boolean() (bool, bool) {
	switch {
	case d.at('t'):
		_, err := d.literal("true", true)
		return true, err == nil
	case d.at('f'):
		_, err := d.literal("false", false)
		return false, err == nil
	}
	return false, false
}

// raw reads any value as a RawExtension takes it: its bytes (copied), none for null.
func (d *jsonDecoder) raw() ([]byte, bool) {
	start := d.pos
	if _, err := d.value(0); err != nil {
		return nil, false
	}
	if string(d.data[start:d.pos]) == "null" {
		return nil, true
	}
	return append([]byte(nil), d.data[start:d.pos]...), true
}

// strings3 reads an object of at most three string fields named a, b and c.
func (d *jsonDecoder) strings3(a, b, c string) (x, y, z string, ok bool) {
	names := [3]string{a, b, c}
	var values [3]string
	var seen uint8
	ok = d.eachMember(func(key []byte) bool {
		i := slices.Index(names[:], string(key))
		if i < 0 || !claim(&seen, i) {
			return false
		}
		var read bool
		values[i], read = d.plainString()
		return read
	})
	return values[0], values[1], values[2], ok
}

// claim marks field i read (false: it was, the key is repeated).
func claim(seen *uint8, i int) bool {
	if *seen&(1<<i) != 0 {
		return false
	}
	*seen |= 1 << i
	return true
}

func (d *jsonDecoder) gvk() (metav1.GroupVersionKind, bool) {
	g, v, k, ok := d.strings3("group", "version", "kind")
	return metav1.GroupVersionKind{Group: g, Version: v, Kind: k}, ok
}

func (d *jsonDecoder) gvr() (metav1.GroupVersionResource, bool) {
	g, v, r, ok := d.strings3("group", "version", "resource")
	return metav1.GroupVersionResource{Group: g, Version: v, Resource: r}, ok
}

// stringList reads an array of strings (an empty one is an empty slice, as encoding/json makes it).
func (d *jsonDecoder) stringList() ([]string, bool) {
	if !d.at('[') {
		return nil, false
	}
	d.pos++
	out := []string{}
	d.space()
	if d.at(']') {
		d.pos++
		return out, true
	}
	for {
		d.space()
		s, ok := d.plainString()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		d.space()
		switch {
		case d.at(','):
			d.pos++
		case d.at(']'):
			d.pos++
			return out, true
		default:
			return nil, false
		}
	}
}

var userInfoFields = []string{"username", "uid", "groups", "extra"}

func (d *jsonDecoder) userInfo() (authenticationv1.UserInfo, bool) {
	var info authenticationv1.UserInfo
	var seen uint8
	ok := d.eachMember(func(key []byte) bool {
		i := slices.Index(userInfoFields, string(key))
		if i < 0 || !claim(&seen, i) {
			return false
		}
		read := false
		switch i {
		case 0:
			info.Username, read = d.plainString()
		case 1:
			info.UID, read = d.plainString()
		case 2:
			info.Groups, read = d.stringList()
		case 3:
			info.Extra = map[string]authenticationv1.ExtraValue{}
			// a map: a repeated key keeps its last value, as encoding/json's does
			read = d.eachMember(func(key []byte) bool {
				values, ok := d.stringList()
				info.Extra[string(key)] = values
				return ok
			})
		}
		return read
	})
	return info, ok
}
