package audit

// settler maps one response's error codes onto the line's resources and
// counts what it cannot map (entries for resources left off the line),
// so the outcome still reflects every resource.
type settler struct {
	b     *builder
	ln    *line
	byKey map[rkey][]int // built on first use

	extraOK, extraErr int  // entries matching no recorded resource
	topErr            bool // a request-level error
}

func newSettler(b *builder) *settler { return &settler{b: b, ln: b.ln} }

// rkey is the key a resource is matched by: its type and its name, so a
// group and a topic of one name stay apart. The zero rkey matches nothing.
type rkey struct{ typ, name string }

// keyOf is the key of a resource of typ named name. A name under
// maxString is used as is, so that looking up a response's entry
// allocates nothing; a longer one is cut as the resource's name was.
func keyOf(typ, name string) rkey {
	if len(name) > maxString {
		name = cut(name)
	}
	return rkey{typ, name}
}

// find returns the resources Begin recorded under key.
func (s *settler) find(key rkey) []int {
	if s.byKey == nil {
		s.byKey = make(map[rkey][]int, s.b.described)
		for i := range s.b.described {
			if k := s.ln.Resources[i].key; k != (rkey{}) {
				s.byKey[k] = append(s.byKey[k], i)
			}
		}
	}
	return s.byKey[key]
}

// key records an entry's code on the resources with key; an entry for
// none is only counted.
func (s *settler) key(key rkey, code int16, msg *string) {
	idx := s.find(key)
	if len(idx) == 0 {
		s.tally(code)
		return
	}
	for _, i := range idx {
		s.set(i, code, msg)
	}
}

// at records the code of the i-th entry of a response whose entries
// follow the request's order (ACL creations and filters).
func (s *settler) at(i int, code int16, msg *string) {
	if i < s.b.described {
		s.set(i, code, msg)
		return
	}
	s.tally(code)
}

// all records one code on every resource: for APIs whose response has
// no per-resource entries.
func (s *settler) all(code int16, msg *string) {
	for i := range s.ln.Resources {
		s.set(i, code, msg)
	}
}

// top records a request-level error, which stands for every resource.
func (s *settler) top(code int16, msg *string) {
	if code == 0 {
		return
	}
	s.topErr = true
	s.ln.Error = codeName(code)
	if msg != nil && s.ln.Message == "" {
		s.ln.Message = s.b.str(*msg)
	}
	s.all(code, nil)
}

func (s *settler) tally(code int16) {
	if code == 0 {
		s.extraOK++
	} else {
		s.extraErr++
	}
}

// set gives resource i its outcome unless kproxy refused it; the broker's
// message is kept for an error while the line has room for it.
func (s *settler) set(i int, code int16, msg *string) {
	r := &s.ln.Resources[i]
	if r.refused {
		return
	}
	r.Outcome = codeName(code)
	if code != 0 && msg != nil && r.Message == "" && s.b.cost+len(*msg) <= s.b.max() {
		r.Message = s.b.str(*msg)
	}
}

// outcome is ok when every resource (and entry) is NONE, error when none
// is, partial otherwise. Resources the response says nothing of do not
// count; a request-level error is an error.
func (s *settler) outcome() string {
	ok, bad := s.extraOK, s.extraErr
	for _, r := range s.ln.Resources {
		switch {
		case r.refused:
			bad++
		case r.Outcome == "NONE":
			ok++
		case r.Outcome != "":
			bad++
		}
	}
	if s.topErr {
		bad++
	}
	switch {
	case bad == 0:
		return outcomeOK
	case ok == 0:
		return outcomeError
	}
	return outcomePartial
}

// firstCode is the first non-zero code of a list of partitions' entries,
// with its message: what a topic's outcome is.
func firstCode[P any](ps []P, code func(*P) (int16, *string)) (int16, *string) {
	for i := range ps {
		if c, m := code(&ps[i]); c != 0 {
			return c, m
		}
	}
	return 0, nil
}
