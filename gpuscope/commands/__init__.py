"""gpuscope.commands"""
