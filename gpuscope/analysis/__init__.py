"""gpuscope.analysis"""
