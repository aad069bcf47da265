// Package pos formats where a problem sits in a user's file the one way
// every ginsim command reports it: "file:line:column: field \"path\":
// message". The trace reader, the cluster loader and the sweep's study
// parser share it, so their errors read alike; YAML takes the line out of
// a gopkg.in/yaml.v3 error for them.
package pos
