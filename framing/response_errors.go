package framing

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FirstError returns the first non-zero error code in a response: the
// top-level code or any per-topic, per-partition or per-member one. Produce
// and Fetch, the busiest, are walked directly; other APIs by reflection
// over kmsg's structs, which keeps every API's nested codes covered.
func FirstError(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	}
	return walkErrorCode(reflect.ValueOf(resp))
}

var int16Type = reflect.TypeOf(int16(0))

func walkErrorCode(v reflect.Value) int16 {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return walkErrorCode(v.Elem())
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := t.Field(i)
			if f.Name == "ErrorCode" && f.Type == int16Type {
				if c := int16(v.Field(i).Int()); c != 0 {
					return c
				}
				continue
			}
			// Lists of numbers or bytes (replicas, records) hold no codes.
			if k := f.Type.Kind(); k == reflect.Struct || k == reflect.Pointer || (k == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct) {
				if c := walkErrorCode(v.Field(i)); c != 0 {
					return c
				}
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if c := walkErrorCode(v.Index(i)); c != 0 {
				return c
			}
		}
	}
	return 0
}
