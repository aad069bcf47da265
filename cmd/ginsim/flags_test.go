package main

import "flag"

var update = flag.Bool("update", false, "rewrite testdata/*.txtar with the actual output")
