package policy

import (
	"encoding/binary"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// ErrorResponse builds the response a broker would send if it refused req
// with code: the same API and version, mirroring the request's topics,
// partitions, groups and transactions with code at every level that has an
// error code, so each client sees its own error where it looks for it. ok is
// false when the response has no error code anywhere (the request cannot be
// refused in-band).
func ErrorResponse(req kmsg.Request, code int16) (resp kmsg.Response, ok bool) {
	resp = req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	r := reflect.ValueOf(resp).Elem()
	mirror(reflect.ValueOf(req).Elem(), r, code)
	if !carries(resp, code) {
		// The codes set are not in this version's encoding (a top-level
		// code that moved into a list, say).
		oneErrorElement(r, code)
	}
	return resp, carries(resp, code)
}

// carries reports whether code survives encoding resp, as the client will
// read it.
func carries(resp kmsg.Response, code int16) bool {
	back := resp.RequestKind().ResponseKind()
	back.SetVersion(resp.GetVersion())
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		return false
	}
	return framing.FirstError(back) == code
}

// EncodeResponse frames resp as the answer to the request with correlation
// id corr: size, response header of the right version, body.
func EncodeResponse(resp kmsg.Response, corr int32) []byte {
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if framing.ResponseHeaderVersion(resp.Key(), resp.GetVersion()) == 1 {
		b = append(b, 0) // no tagged fields
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// identity fields name what an element of a request is about; they are
// copied into the matching response element.
var identity = map[string]bool{"Topic": true, "TopicID": true, "Partition": true, "Group": true,
	"TransactionalID": true, "Name": true, "ResourceName": true, "ResourceType": true, "ProducerID": true}

var int16Type = reflect.TypeOf(int16(0))

// mirror fills resp from req (both structs), with code in every error
// code field.
func mirror(req, resp reflect.Value, code int16) {
	rt := resp.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		out := resp.Field(i)
		if f.Name == "ErrorCode" && f.Type == int16Type {
			out.SetInt(int64(code))
			continue
		}
		in := req.FieldByName(f.Name)
		switch {
		case identity[f.Name] && in.IsValid() && in.Type() == f.Type:
			out.Set(in)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			mirrorSlice(req, f.Name, out, code)
		}
	}
}

// mirrorSlice builds the response slice field name from the request's
// elements of the same name, or from a request list of plain names or
// partition numbers (DeleteTopics v0-5 TopicNames, AddPartitionsToTxn
// Partitions []int32).
func mirrorSlice(req reflect.Value, name string, out reflect.Value, code int16) {
	in := req.FieldByName(name)
	if !in.IsValid() || in.Kind() != reflect.Slice || in.Len() == 0 {
		if alias := req.FieldByName(listAliases[name]); alias.IsValid() {
			in = alias
		}
	}
	if !in.IsValid() || in.Kind() != reflect.Slice || in.Len() == 0 {
		return
	}
	elem := out.Type().Elem()
	slice := reflect.MakeSlice(out.Type(), in.Len(), in.Len())
	for j := 0; j < in.Len(); j++ {
		dst := slice.Index(j)
		if d, ok := dst.Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
		src := in.Index(j)
		switch src.Kind() {
		case reflect.Struct:
			mirror(src, dst, code)
		case reflect.Int32: // a bare partition number
			if p := dst.FieldByName("Partition"); p.IsValid() {
				p.SetInt(src.Int())
			}
			setErrorCode(dst, elem, code)
		case reflect.String: // a bare name: topic, group, key, transaction
			setName(dst, src.String())
			setErrorCode(dst, elem, code)
		}
	}
	out.Set(slice)
}

func setErrorCode(v reflect.Value, t reflect.Type, code int16) {
	if f, ok := t.FieldByName("ErrorCode"); ok && f.Type == int16Type {
		v.FieldByIndex(f.Index).SetInt(int64(code))
	}
}

// listAliases name the request list a response list answers when the two
// are named differently.
var listAliases = map[string]string{"Topics": "TopicNames", "Coordinators": "CoordinatorKeys",
	"TransactionStates": "TransactionalIDs"}

// setName puts a bare name from the request into the element's name field.
func setName(v reflect.Value, name string) {
	for _, field := range []string{"Topic", "Group", "Key", "TransactionalID", "Name"} {
		f := v.FieldByName(field)
		switch {
		case !f.IsValid():
			continue
		case f.Kind() == reflect.String:
			f.SetString(name)
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf(&name))
		default:
			continue
		}
		return
	}
}

// oneErrorElement handles responses whose lists do not mirror a request
// list by name (CreateAcls answers Creations with Results): it puts code in
// a single element of the first list that has an error code.
func oneErrorElement(resp reflect.Value, code int16) {
	for i := 0; i < resp.NumField(); i++ {
		f := resp.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		elem := f.Type().Elem()
		if _, ok := elem.FieldByName("ErrorCode"); !ok {
			continue
		}
		s := reflect.MakeSlice(f.Type(), 1, 1)
		if d, ok := s.Index(0).Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
		setErrorCode(s.Index(0), elem, code)
		f.Set(s)
		return
	}
}
