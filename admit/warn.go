package admit

// warnings says what is allowed but dangerous about a rule that passed
// every check.
func warnings(p parsed) []string {
	var out []string
	if p.never {
		out = append(out, "the rule never expires: it stays on the routers until someone withdraws it")
	}
	return out
}
