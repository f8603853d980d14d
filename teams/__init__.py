"""Teams: members with roles (roles.py holds the one permission table), invitations, budgets per member, the team's
wallet context and its audit log."""
