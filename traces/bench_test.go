package traces

import (
	"bytes"
	"testing"
)

// benchConfig is EP256 × 128 tokens × top-8: 262,144 selections per layer.
func benchConfig(b *testing.B, routing string) GenConfig {
	return GenConfig{Model: mustModel(b, "deepseek-v3"), EP: 256, TokensPerRank: 128, Routing: routing, Seed: 1}
}

func BenchmarkGenerate(b *testing.B) {
	for _, routing := range []string{"uniform", "grouped:model", "zipf:1.2", "balanced"} {
		b.Run(routing, func(b *testing.B) {
			cfg := benchConfig(b, routing)
			for b.Loop() {
				if _, err := Generate(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	tr := genOK(b, benchConfig(b, "uniform"))
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		if err := tr.Write(&buf, gz); err != nil {
			b.Fatal(err)
		}
		name := "plain"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			for b.Loop() {
				if _, err := Load(bytes.NewReader(buf.Bytes()), "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	tr := genOK(b, benchConfig(b, "uniform"))
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := tr.Write(&buf, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStep(b *testing.B) {
	tr := genOK(b, benchConfig(b, "uniform"))
	for b.Loop() {
		if _, err := tr.Step(0, 3); err != nil {
			b.Fatal(err)
		}
	}
}
