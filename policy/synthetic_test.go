package policy

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// populate gives every list in a request one element, with identity
// fields set, so a mirrored response has somewhere to put its errors.
func populate(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch name := v.Type().Field(i).Name; {
		case name == "Topic" && f.Kind() == reflect.String:
			f.SetString("orders")
		case name == "Topic" && f.Kind() == reflect.Pointer:
			s := "orders"
			f.Set(reflect.ValueOf(&s))
		case name == "TopicID":
			f.Index(0).SetUint(7)
		case name == "Partition" && f.Kind() == reflect.Int32:
			f.SetInt(3)
		case name == "Group" && f.Kind() == reflect.String:
			f.SetString("g")
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			populate(s.Index(0))
			f.Set(s)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int32:
			f.Set(reflect.ValueOf([]int32{3}))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{"orders"}))
		}
	}
}

// Every API and version kmsg knows gets an error response that kmsg parses
// back, with the request's correlation id and the error where the response
// has room for one.
func TestErrorResponseEveryAPIVersion(t *testing.T) {
	const code = 29 // TOPIC_AUTHORIZATION_FAILED
	var noRoom []string
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			populate(reflect.ValueOf(req).Elem())
			resp, ok := ErrorResponse(req, code)
			frame := EncodeResponse(resp, -77)
			if got := framing.ResponseCorrelationID(frame); got != -77 {
				t.Fatalf("%s v%d: correlation id %d", framing.Name(key), v, got)
			}
			back, err := framing.DecodeResponse(frame, key, v)
			if err != nil || back == nil {
				t.Fatalf("%s v%d: response does not parse back: %v", framing.Name(key), v, err)
			}
			if !ok {
				noRoom = append(noRoom, framing.Name(key))
				break
			}
			if got := framing.FirstError(back); got != code {
				t.Fatalf("%s v%d: error code %d after parsing back, want %d", framing.Name(key), v, got, code)
			}
		}
	}
	// AlterReplicaLogDirs answers per partition under a shape its request
	// does not share; refusing it means closing the connection.
	if len(noRoom) != 1 || noRoom[0] != "AlterReplicaLogDirs" {
		t.Fatalf("APIs whose refusal has no error code: %v", noRoom)
	}
}
