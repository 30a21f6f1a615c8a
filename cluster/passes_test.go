package cluster

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// namedAddresses lists the fields of t (recursively) that name a network
// address, but for those that never name a broker: a group member's
// ClientHost, an ACL's Host, a Kafka Streams application's UserEndpoint.
func namedAddresses(t reflect.Type, path string, seen map[reflect.Type]bool, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		p := path + "." + f.Name
		if f.Name == "ClientHost" || f.Name == "UserEndpoint" || strings.HasSuffix(p, "ACLs.Host") {
			continue
		}
		if f.Name == "Host" || f.Name == "Port" {
			*out = append(*out, p)
		}
		namedAddresses(f.Type, p, seen, out)
	}
}

// Every response kmsg knows that has an address field is either rewritten
// (Carries) or refused in cluster mode: a new API that names brokers fails
// here until kproxy rewrites or refuses it (issue 27, item 9: DescribeQuorum
// leaked controller listeners).
func TestEveryAddressCarryingAPIIsRewrittenOrRefused(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		r := kmsg.ResponseForKey(k)
		if r == nil {
			if Passes(k) {
				t.Errorf("key %d, which kmsg does not know, passes", k)
			}
			continue
		}
		var found []string
		namedAddresses(reflect.TypeOf(r), kmsg.NameForKey(k), map[reflect.Type]bool{}, &found)
		if len(found) > 0 && !Carries(k) && Passes(k) {
			t.Errorf("%s names addresses (%v) and is neither rewritten nor refused", kmsg.NameForKey(k), found)
		}
	}
	if Passes(int16(kmsg.DescribeQuorum)) || !Passes(int16(kmsg.Metadata)) || !Passes(int16(kmsg.DescribeGroups)) {
		t.Error("DescribeQuorum passes, or Metadata or DescribeGroups is refused")
	}
	if Passes(kmsg.MaxKey + 1) {
		t.Error("a key past kmsg's passes")
	}
}
