"""The sweep report: an offline HTML folder from the index (its reads, plots' labels, category sheet, speed notes,
throughput and the fleet question), written whole into a folder of its own."""
