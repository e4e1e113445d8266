module pfrtest/alloc

go 1.19
