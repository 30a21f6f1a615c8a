// Package topicplant fills every topic field of a kmsg request with a
// distinct name or id, found by reflection, so that tests can check that
// the code listing a request's topics (framing.EachTopic and its users)
// finds each one, for every request type kmsg knows: a new Kafka API, or
// a new topic field in an old one, then fails those tests instead of
// slipping past topic rules.
package topicplant

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicResource is TOPIC in both ConfigResourceType and ACLResourceType.
const topicResource = 2

// literalPattern is the ACL pattern type LITERAL: an ACL resource planted
// names that one topic (any other pattern may cover any topic).
const literalPattern = 3

// Planted is what Plant put in a request.
type Planted struct {
	// Names are the topic names, written as names or as the names of IDs.
	Names []string
	// IDs maps each topic id written to the name it stands for.
	IDs map[[16]byte]string
}

// Any reports whether the request had a topic field.
func (p Planted) Any() bool { return len(p.Names) > 0 }

// Plant fills req (a pointer to a kmsg request struct) with two elements
// in every list of structs and every list of topic names, a struct behind
// every pointer, type TOPIC in every resource type, and a new topic in
// every topic field: fields whose name says Topic (string, *string,
// []string; TopicID [16]byte) and a ResourceName beside a ResourceType.
// Fields for patterns (…Regex) are left empty: they are not topics.
//
// Where a struct has both a name and a TopicID, as in the requests whose
// newer versions name topics by id, byID says which one to fill: a real
// request fills one only.
func Plant(req kmsg.Request, byID bool) Planted {
	p := &planter{byID: byID, out: Planted{IDs: map[[16]byte]string{}}}
	p.fill(reflect.ValueOf(req).Elem())
	return p.out
}

type planter struct {
	byID bool
	n    int
	out  Planted
}

func (p *planter) name() string {
	p.n++
	name := fmt.Sprintf("topic-%04d", p.n)
	p.out.Names = append(p.out.Names, name)
	return name
}

func (p *planter) id() [16]byte {
	p.n++
	var id [16]byte
	id[0], id[1], id[15] = byte(p.n>>8), byte(p.n), 0xAB
	name := fmt.Sprintf("by-id-%04d", p.n)
	p.out.IDs[id] = name
	p.out.Names = append(p.out.Names, name)
	return id
}

var byteArray16 = reflect.TypeOf([16]byte{})

// topicField reports whether a field of this name holds topics.
func topicField(name string, s reflect.Value) bool {
	if strings.Contains(name, "Regex") {
		return false
	}
	if name == "ResourceName" {
		return s.FieldByName("ResourceType").IsValid()
	}
	return strings.Contains(name, "Topic")
}

// either reports whether struct s names its topic by name or by id.
func (p *planter) either(s reflect.Value) bool {
	id, ok := s.Type().FieldByName("TopicID")
	if !ok || id.Type != byteArray16 {
		return false
	}
	name, ok := s.Type().FieldByName("Topic")
	return ok && (name.Type.Kind() == reflect.String || name.Type.Kind() == reflect.Pointer)
}

func (p *planter) fill(s reflect.Value) {
	t := s.Type()
	for i := 0; i < t.NumField(); i++ {
		switch f := t.Field(i); {
		case f.Name == "ResourceType" && f.Type.Kind() == reflect.Int8:
			s.Field(i).SetInt(topicResource)
		case f.Name == "ResourcePatternType" && f.Type.Kind() == reflect.Int8:
			s.Field(i).SetInt(literalPattern)
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f, v := t.Field(i), s.Field(i)
		if !f.IsExported() || f.Name == "UnknownTags" {
			continue
		}
		topic := topicField(f.Name, s)
		if topic && p.either(s) && (f.Type == byteArray16) != p.byID {
			continue
		}
		switch {
		case topic && f.Type == byteArray16:
			v.Set(reflect.ValueOf(p.id()))
		case topic && f.Type.Kind() == reflect.String:
			v.SetString(p.name())
		case topic && f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.String:
			name := p.name()
			v.Set(reflect.ValueOf(&name))
		case topic && f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			v.Set(reflect.ValueOf([]string{p.name(), p.name()}))
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			v.Set(reflect.New(f.Type.Elem()))
			p.fill(v.Elem())
		case f.Type.Kind() == reflect.Struct:
			p.fill(v)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			v.Set(reflect.MakeSlice(f.Type, 2, 2))
			for j := 0; j < 2; j++ {
				p.fill(v.Index(j))
			}
		}
	}
}
