package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// encodingJSON is what writeJSON wrote before appendJSON: the reference.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "error: " + err.Error()
	}
	return buf.String()
}

// RuleList.appendJSON writes exactly the bytes encoding/json writes, for
// any strings (escapes, invalid UTF-8, U+2028), times (zones, years
// encoding/json refuses) and empty or absent fields.
func FuzzRuleListJSON(f *testing.F) {
	f.Add("match destination 10.0.0.1/32 then discard", "ddos <&>", "", int64(1767225600123456789), 3600, int64(0), true, 7, "id")
	f.Add("a\"b\\c\x01\b\f\n\r\t\x7f", "\xff\xfe\u2028\u2029é", "s1", int64(-62135596800000000), 5400, int64(1), false, 0, "")
	f.Add("", "", "\x00", int64(253402300800000000000/1000), 37, int64(-5), true, -3, "precedence")
	f.Add("x", "y", "z", int64(1767225600000000000), 90000, int64(2), false, 1, "")
	f.Add("x", "y", "z", int64(1767225600000000000), -86400, int64(2), true, 1, "")
	f.Fuzz(func(t *testing.T, text, reason, site string, at int64, zone int, id int64, flag bool, n int, order string) {
		tm := time.Unix(0, at).In(time.FixedZone("z", zone))
		r := Rule{ID: id, Family: "ipv4-flowspec", Text: text, Match: reason, Action: text, Reason: reason, Actor: site,
			State: "active", CreatedAt: tm, UpdatedAt: tm.Add(time.Duration(n) * time.Hour), Announced: flag, LastError: reason,
			ShadowedBy: id * 2, Precedence: n, AnnouncedTo: site, Origin: site, Set: reason}
		if flag {
			r.Sites, r.Peers, r.NotSent, r.ExpiresAt = []string{site, text}, []string{}, []string{reason}, &tm
		} else {
			r.Sites = []string{}
		}
		lists := []RuleList{
			{Order: order, Rules: []Rule{r, {}, r}, Next: id},
			{Rules: []Rule{}},
			{},
		}
		for _, l := range lists {
			want := encodingJSON(t, l)
			got, ok := l.appendJSON(nil)
			if !ok {
				if want[:6] != "error:" && zone%60 == 0 && zone > -86400 && zone < 86400 && tm.Year() >= 0 && tm.Year() <= 9999 {
					t.Fatalf("appendJSON refused a list encoding/json writes:\n%s", want)
				}
				continue
			}
			if string(got)+"\n" != want {
				t.Fatalf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
			}
		}
	})
}

// Every field of Rule is written by appendJSON: a field added to Rule
// but not to appendJSON fails here, set or not (an omitempty field
// missed would otherwise go unnoticed while it is empty).
func TestRuleJSONWritesEveryField(t *testing.T) {
	for _, set := range []bool{false, true} {
		var r Rule
		v := reflect.ValueOf(&r).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			if !set {
				continue
			}
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int, reflect.Int64:
				f.SetInt(7)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Slice:
				f.Set(reflect.ValueOf([]string{"a", "b"}))
			case reflect.Struct, reflect.Pointer:
				tm := time.Date(2026, 11, 26, 1, 2, 3, 4000, time.UTC)
				if f.Kind() == reflect.Pointer {
					f.Set(reflect.ValueOf(&tm))
				} else {
					f.Set(reflect.ValueOf(tm))
				}
			default:
				t.Fatalf("field %s of kind %s: teach this test (and appendJSON) about it", v.Type().Field(i).Name, f.Kind())
			}
		}
		want := encodingJSON(t, RuleList{Rules: []Rule{r}})
		got, ok := RuleList{Rules: []Rule{r}}.appendJSON(nil)
		if !ok || string(got)+"\n" != want {
			t.Fatalf("appendJSON (ok %v):\n%s\nencoding/json:\n%s", ok, got, want)
		}
	}
}
