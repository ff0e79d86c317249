module tidelake.test/clientgo

go 1.21

require github.com/tikv/client-go/v2 v2.0.4
