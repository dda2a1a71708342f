"""The `memclaw` command line. Command functions stay thin; the work lives in the library modules."""
