package frrtest

import (
	"reflect"
	"testing"
)

// Output of "show bgp ipv4 flowspec detail" as FRR 8.4.4 printed it.
const detail = `BGP flowspec entry: (flags 0x418)
	Destination Address 10.21.4.0/24
	Destination Port >= 1024 , <= 2048 , = 80 
	FS:rate 0.000000
	received for 00:00:02
	not installed in PBR
BGP flowspec entry: (flags 0x418)
	Source Address 198.51.100.0/24
	IP Protocol = 17 
	FS:redirect VRF RT:65000:100 FS:marking 10
	received for 00:00:02
	not installed in PBR

Displayed  2 flowspec entries
`

func TestParseFlows(t *testing.T) {
	got := parseFlows(detail)
	want := []Flow{
		{Match: []string{"Destination Address 10.21.4.0/24", "Destination Port >= 1024 , <= 2048 , = 80"}, Actions: "FS:rate 0.000000"},
		{Match: []string{"Source Address 198.51.100.0/24", "IP Protocol = 17"}, Actions: "FS:redirect VRF RT:65000:100 FS:marking 10"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseFlows:\n got  %q\n want %q", got, want)
	}
	if got[1].Key() != "Source Address 198.51.100.0/24" {
		t.Errorf("Key() = %q", got[1].Key())
	}
	if len(parseFlows("Displayed  0 flowspec entries\n")) != 0 {
		t.Error("an empty table parsed as flows")
	}
}
