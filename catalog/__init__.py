"""What the cloud offers: regions, zones, chips with their published figures, nodes and instance specs."""
