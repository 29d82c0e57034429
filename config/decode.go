package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// decodeFile reads text into f in two steps, so that one mistake does not
// hide the others: the TOML syntax is parsed into plain values first (a
// syntax error stops there, as nothing after it can be trusted), then
// every key is matched against the layout of file. A key that file does
// not have, a value of the wrong type, and a table written where a list
// of tables belongs (or the reverse) are each one problem naming the key,
// in words an operator can act on; every key that fits is still decoded,
// so that the checks of Parse run on the rest of the file.
//
// bad holds the keys whose value was refused: a check must not report
// the same key again as missing.
func decodeFile(text string, f *file) (problems []keyProblem, bad map[string]bool, err error) {
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		return nil, nil, err
	}
	d := &decoder{bad: map[string]bool{}}
	d.table(raw, reflect.ValueOf(f).Elem(), "")
	return d.problems, d.bad, nil
}

// keyProblem is a problem with one key, before its line is known.
type keyProblem struct {
	key, msg string
}

type decoder struct {
	problems []keyProblem
	bad      map[string]bool
}

func (d *decoder) fail(key, format string, args ...any) {
	d.problems = append(d.problems, keyProblem{key, fmt.Sprintf(format, args...)})
	d.bad[key] = true
}

// fields maps the TOML names of a struct's fields (those of embedded
// structs included) to their index paths.
func fields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			for name, idx := range fields(sf.Type) {
				out[name] = append([]int{i}, idx...)
			}
			continue
		}
		if name, _, _ := strings.Cut(sf.Tag.Get("toml"), ","); name != "" && name != "-" {
			out[name] = []int{i}
		}
	}
	return out
}

// table decodes the keys of m into the struct v; path is m's dotted key.
func (d *decoder) table(m map[string]any, v reflect.Value, path string) {
	fs := fields(v.Type())
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key := joinKey(path, k)
		idx, ok := fs[k]
		if !ok {
			msg := "unknown key; check its spelling and section against config.example.toml"
			for name := range fs {
				if strings.EqualFold(name, k) {
					msg = fmt.Sprintf("unknown key; keys are case-sensitive: write %s", name)
				}
			}
			d.problems = append(d.problems, keyProblem{key, msg})
			continue
		}
		d.value(m[k], v.FieldByIndex(idx), key, k)
	}
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// value decodes x into v, or records why it cannot. name is the key's
// own name, for examples.
func (d *decoder) value(x any, v reflect.Value, key, name string) bool {
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		if !d.value(x, nv.Elem(), key, name) {
			return false
		}
		v.Set(nv)
		return true
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			d.fail(key, "%s; got %s", stringWanted(name, x), describe(x))
			return false
		}
		v.SetString(s)
		return true
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			d.fail(key, "true or false is expected, e.g. %s (without quotes); got %s", assign(name, "true"), describe(x))
			return false
		}
		v.SetBool(b)
		return true
	case reflect.Int64:
		n, ok := x.(int64)
		if !ok {
			d.fail(key, "%s; got %s", numberWanted(name, x), describe(x))
			return false
		}
		v.SetInt(n)
		return true
	case reflect.Float64:
		switch n := x.(type) {
		case float64:
			v.SetFloat(n)
		case int64:
			v.SetFloat(float64(n))
		default:
			d.fail(key, "a number is expected, e.g. %s; got %s", assign(name, "0.5"), describe(x))
			return false
		}
		return true
	case reflect.Struct:
		return d.structValue(x, v, key)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			return d.tables(x, v, key)
		}
		return d.list(x, v, key, name)
	}
	// Only reached if file gains a field of a kind handled nowhere above.
	d.fail(key, "cannot be decoded (a %s field); please report this", v.Kind())
	return false
}

// structValue decodes a [section].
func (d *decoder) structValue(x any, v reflect.Value, key string) bool {
	section := stripIndexes(key)
	switch t := x.(type) {
	case map[string]any:
		d.table(t, v, key)
		return true
	case []map[string]any:
		if len(t) == 1 {
			d.problems = append(d.problems, keyProblem{key, fmt.Sprintf(
				"[[%s]] (double brackets) makes a list of tables, but there is only one %s section: write [%s]", section, section, section)})
			d.table(t[0], v, key)
			return true
		}
		d.fail(key, "[[%s]] (double brackets) is written %d times, but there is only one %s section: write [%s] once, with single brackets",
			section, len(t), section, section)
		return false
	}
	d.fail(key, "a table is expected: write its keys under a [%s] line; got %s", section, describe(x))
	return false
}

// tables decodes a list of [[section]]s.
func (d *decoder) tables(x any, v reflect.Value, key string) bool {
	section := stripIndexes(key)
	var elems []map[string]any
	switch t := x.(type) {
	case []map[string]any:
		elems = t
	case map[string]any:
		// [neighbor] where [[neighbor]] belongs: say so, and still check
		// what the table holds as if it were the list's only element.
		d.problems = append(d.problems, keyProblem{key, fmt.Sprintf(
			"[%s] (single brackets) is one table, but %s entries are a list: write [[%s]] (double brackets) before each one", section, section, section)})
		elems = []map[string]any{t}
	case []any:
		for i, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				d.fail(key, "entry %d: a table is expected: write each entry as a [[%s]] line followed by its keys; got %s", i+1, section, describe(e))
				return false
			}
			elems = append(elems, m)
		}
	default:
		d.fail(key, "a list of tables is expected: write each entry as a [[%s]] line followed by its keys; got %s", section, describe(x))
		return false
	}
	out := reflect.MakeSlice(v.Type(), len(elems), len(elems))
	for i, m := range elems {
		d.table(m, out.Index(i), key+"."+strconv.Itoa(i))
	}
	v.Set(out)
	return true
}

// list decodes an array of plain values.
func (d *decoder) list(x any, v reflect.Value, key, name string) bool {
	arr, ok := x.([]any)
	if !ok {
		example := name + ` = ["..."]`
		if s, isStr := x.(string); isStr {
			example = fmt.Sprintf("%s = [%q]", name, s)
		} else if n, isInt := x.(int64); isInt {
			example = fmt.Sprintf("%s = [%d]", name, n)
		}
		d.fail(key, "a list in square brackets is expected, e.g. %s; got %s", example, describe(x))
		return false
	}
	out := reflect.MakeSlice(v.Type(), len(arr), len(arr))
	sub := &decoder{bad: map[string]bool{}}
	for i, e := range arr {
		if !sub.value(e, out.Index(i), key, "") {
			d.fail(key, "entry %d: %s", i+1, sub.problems[len(sub.problems)-1].msg)
			return false
		}
	}
	v.Set(out)
	return true
}

// assign is the TOML line that sets name to value, or value alone for an
// entry of a list (name "").
func assign(name, value string) string {
	if name == "" {
		return value
	}
	return name + " = " + value
}

// numberWanted says a number is expected, with an example built from
// what was written when it holds one.
func numberWanted(name string, x any) string {
	switch t := x.(type) {
	case string:
		s := strings.TrimSpace(t)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return "a number is expected, e.g. " + assign(name, s)
		}
	case float64:
		if t == float64(int64(t)) {
			return "a whole number is expected, e.g. " + assign(name, strconv.FormatInt(int64(t), 10))
		}
		return "a whole number is expected"
	}
	return "a number is expected (digits, without quotes)"
}

// stringWanted says a string is expected, with an example built from
// what was written when it is a plain value.
func stringWanted(name string, x any) string {
	switch t := x.(type) {
	case int64, float64, bool:
		return "a string in quotes is expected, e.g. " + assign(name, strconv.Quote(fmt.Sprint(t)))
	}
	return "a string in quotes is expected"
}

// describe names the type and, for a plain value, the value of x as
// TOML wrote it.
func describe(x any) string {
	switch t := x.(type) {
	case string:
		return fmt.Sprintf("the string %q", t)
	case int64:
		return fmt.Sprintf("the number %d", t)
	case float64:
		return fmt.Sprintf("the number %v", t)
	case bool:
		return fmt.Sprintf("%v", t)
	case time.Time:
		return "a date/time"
	case []any:
		return "a list"
	case []map[string]any:
		return "a list of tables"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", x)
}
